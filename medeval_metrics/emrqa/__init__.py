"""emrQA (Pampari et al., EMNLP 2018): logical forms and evidence QA over the user's clinical notes.

The data sits behind the n2c2 data-use agreement, so nothing from it ships with the pack: users
point it at their own ``data.json`` and ``data-ql.csv``; :mod:`.prepare` derives seeded splits into a
cache, :mod:`.metrics` scores evidence and logical forms, :mod:`.tasks` wires both into lm-eval.
Patient-note text never appears in errors or logs.
"""
