"""A BERT encoder whose [CLS] vector is the text's bag of words, so cosine similarities can be worked
out by hand (the tiny random encoder in ``tiny_encoder`` gives every pair a cosine near 1).

Each vocabulary word w gets the embedding ``e_w - e_(V+w)`` in a 2V-dimensional space (V words):
zero mean, so the embedding LayerNorm only scales it. One layer, one head, whose query and key weights
are zero: every token attends equally to all tokens, so [CLS]'s output is the mean of the token
vectors; value and output projections are the identity, the feed-forward part is zero, and [CLS],
[SEP], [PAD] and [UNK] embed to zero. The [CLS] vector is then proportional to ``[tf, -tf]`` (tf: the
count of each vocabulary word in the text), and the cosine of a query and a chunk is the cosine of
their word counts: ``sum(q_w * c_w) / (|q| |c|)``. Words outside the vocabulary, punctuation and
position count for nothing. Same classes as MedCPT (``BertModel``, ``BertTokenizerFast``), loadable
through ``AutoModel``/``AutoTokenizer`` from the folder written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_bow_encoder(output_dir: str | Path, words: Sequence[str], max_positions: int = 512) -> Path:
    """Write the encoder for lowercase ``words`` (each one token) and return its folder."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, BertTokenizerFast

    words = list(dict.fromkeys(w.lower() for w in words))
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    vocab = {token: index for index, token in enumerate([*SPECIAL, *words])}
    tokenizer = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tokenizer.save(str(output_dir / "tokenizer.json"))
    fast = BertTokenizerFast(tokenizer_file=str(output_dir / "tokenizer.json"), model_max_length=max_positions)
    fast.save_pretrained(output_dir)
    n_words, hidden = len(words), 2 * len(words)
    config = BertConfig(
        vocab_size=len(SPECIAL) + n_words,
        hidden_size=hidden,
        num_hidden_layers=1,
        num_attention_heads=1,
        intermediate_size=4,
        max_position_embeddings=max_positions,
        hidden_act="relu",
    )
    model = BertModel(config, add_pooling_layer=False)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        embeddings = model.embeddings
        for index in range(n_words):
            embeddings.word_embeddings.weight[len(SPECIAL) + index, index] = 1.0
            embeddings.word_embeddings.weight[len(SPECIAL) + index, n_words + index] = -1.0
        for norm in (embeddings.LayerNorm, *(m for m in model.modules() if isinstance(m, torch.nn.LayerNorm))):
            norm.weight.fill_(1.0)
        layer = model.encoder.layer[0]
        layer.attention.self.value.weight.copy_(torch.eye(hidden))
        layer.attention.output.dense.weight.copy_(torch.eye(hidden))
    model.save_pretrained(output_dir)
    return output_dir
