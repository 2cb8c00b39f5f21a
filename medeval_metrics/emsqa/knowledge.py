"""The EMSQA knowledge base as a data source: its files and the subject area each one serves.

Light on purpose (the spec imports it); retrieval itself lives in ``medeval_metrics.emsqa.rag``.
"""

from __future__ import annotations

from medeval_metrics.data import DataSource
from medeval_metrics.emsqa.data import SUBJECT_AREAS

# Subject area -> knowledge file stem (the authors' code/EMSRAG/retrieval.py). "terminology" belongs
# to no area: only unfiltered (global) retrieval reaches it.
AREA_FILES = {
    "airway_respiration_and_ventilation": "airway, respiratory, ventilation",
    "anatomy": "anatomy",
    "assessment": "assessment",
    "cardiology_and_resuscitation": "cardiovascular",
    "ems_operations": "ems_operations",
    "medical_and_obstetrics_gynecology": "medical",
    "others": "others",
    "pediatrics": "pediatrics",
    "pharmacology": "pharmacology",
    "trauma": "trauma",
}
assert set(AREA_FILES) == set(SUBJECT_AREAS)

# The retrieval settings the RAG loaders read from --metadata (or MEDEVAL_<KEY>); see emsqa.rag.
RAG_OPTIONS = (
    "emsqa_knowledge_revision",
    "rag_mode",
    "rag_retriever",
    "rag_k",
    "rag_chunk_tokens",
    "rag_chunk_overlap",
    "rag_query_encoder",
    "rag_article_encoder",
    "rag_areas",
    "rag_save_retrievals",
    "rag_retrievals",
    "rag_cache_dir",
    "rag_prompt",
)
# Settings no user needed (speed knobs, a switch with one user): given anyway, each is an error saying this.
RAG_REMOVED = {
    "rag_batch_size": "the dense encoders embed 32 texts at a time (speed only: scores do not depend on it).",
    "rag_device": "the dense encoders run on the GPU when torch sees one, else on the CPU.",
    "rag_pool_factor": "retrieve-then-filter looks at the top 10 x rag_k chunks, as the authors' code does.",
    "rag_chunk_tokenizer": "chunks are counted in the retriever's own tokens (words for bm25, the article "
    "encoder's tokenizer for medcpt).",
    "rag_require_all_files": "a knowledge base that lacks files is named in a warning with the items it affects, "
    "and the results record the missing files (missing_files).",
}
KNOWLEDGE_FILES = tuple(sorted({*AREA_FILES.values(), "terminology"}))

KNOWLEDGE_SOURCE = DataSource(
    key="emsqa_knowledge_path",
    description="the EMSQA knowledge base",
    how_to_get=(
        "Download the folder knowledge/ (11 files such as cardiovascular.json, one per subject) from the "
        "authors' repository (github.com/UVA-DSA/EMSQA) or the Hub dataset Xueren/EMS-Knowledge, and "
        "point the pack at that folder."
    ),
    hub_repo="Xueren/EMS-Knowledge",
)
