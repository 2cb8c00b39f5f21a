"""Build a tiny random-weight BERT encoder with a freshly trained WordPiece tokenizer (no download).

Stands in for MedCPT's query and article encoders in offline tests and benchmarks: same model class
(``BertModel`` through ``AutoModel``), same tokenizer type, only smaller. Its vectors are random
projections, so retrieval quality is meaningless; the code path is what gets exercised.
"""

from __future__ import annotations

from pathlib import Path

_CORPUS = [
    "the patient has chest pain and shortness of breath; give oxygen and aspirin",
    "airway breathing circulation assess the scene for safety before patient contact",
    "burns are classified by depth and by the percentage of body surface area",
    "epinephrine for anaphylaxis; nitroglycerin for angina; glucose for hypoglycemia",
    "pediatric patients have smaller airways and a faster respiratory rate",
    "trauma fracture splint bleeding tourniquet shock spinal motion restriction",
]


def build_tiny_encoder(
    output_dir: str | Path,
    vocab_size: int = 300,
    hidden_size: int = 32,
    layers: int = 2,
    seed: int = 0,
    max_positions: int = 512,
) -> Path:
    """Write a loadable ``AutoModel``/``AutoTokenizer`` BERT folder and return its path."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertConfig, BertModel, BertTokenizerFast

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(
        _CORPUS * 4, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=False)
    )
    tokenizer.save(str(output_dir / "tokenizer.json"))
    fast = BertTokenizerFast(tokenizer_file=str(output_dir / "tokenizer.json"), model_max_length=max_positions)
    fast.save_pretrained(output_dir)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(fast),
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=hidden_size * 2,
        max_position_embeddings=max_positions,
    )
    BertModel(config).save_pretrained(output_dir)
    return output_dir
