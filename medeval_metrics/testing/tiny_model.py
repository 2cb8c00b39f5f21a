"""Build a tiny random-weight GPT-2 with a freshly trained BPE tokenizer and a chat template.

No download: the tokenizer is trained on a few sentences here, so the model runs offline in seconds.
It answers nonsense, which is the point: the pack's plumbing is what gets exercised.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

_CORPUS = [
    "Question: which of the following is the first step? Answer with a JSON list of letters.",
    'A. airway B. breathing C. circulation D. disability E. exposure F. other ["a"] ["b", "c"]',
    'The answer is (B). The correct options are A and C. {"answer": ["d"]}',
    "What is the dose of ibuprofen for an adult? Take with food; do not exceed the label dose.",
    "Patient admitted with chest pain. Medications: aspirin 81 mg daily, metoprolol 25 mg twice daily.",
    "MedicationEvent (|medication|) [dosage=x] ConditionEvent (|problem|) OR SymptomEvent (|problem|)",
    "accuracy completeness clarity score reason 1 2 3 4 5 yes no smoker non-smoker obese",
]


def build_tiny_model(output_dir: str | Path, vocab_size: int = 400, seed: int = 0) -> Path:
    """Write a loadable ``AutoModelForCausalLM``/``AutoTokenizer`` folder and return its path."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    special = ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>"]
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=special[1:],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = 1024
    fast.save_pretrained(output_dir)

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(fast),
        n_positions=1024,
        n_embd=64,
        n_layer=2,
        n_head=2,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
    )
    GPT2LMHeadModel(config).save_pretrained(output_dir)
    return output_dir
