"""EMSQA's own ``medeval`` subcommand: ``medeval emsqa-retrievals-header``, the first line of a retrievals file
made by your own retriever (tasks/emsqa/README.md, "Your own retriever")."""

from __future__ import annotations

from typing import Any


def register_cli(sub: Any) -> None:
    p = sub.add_parser(
        "emsqa-retrievals-header",
        help="print the header line of a retrievals file made by your own retriever (rag_retrievals)",
        description="Print the first line of a retrievals file made by your own retriever: its name, and the "
        "knowledge base's digest and chunking under these settings, which the RAG tasks check the file against.",
    )
    p.add_argument("--name", required=True, help="your retriever, as the results will name it")
    p.add_argument(
        "--metadata",
        default="{}",
        help="the run's --metadata JSON (emsqa_knowledge_path, rag_chunk_tokens, rag_chunk_overlap, rag_retriever, "
        "rag_cache_dir); MEDEVAL_<KEY> variables count too",
    )
    p.add_argument("--chunks", help="also write the chunks (id, source, title, text) to this JSON Lines file")
    p.set_defaults(func=_cmd_header)


def _cmd_header(args: Any) -> int:
    from medeval_metrics.emsqa import rag  # lazily: retrieval's imports cost ~0.6 s at every medeval start

    return rag.print_header(args.name, args.metadata, args.chunks)
