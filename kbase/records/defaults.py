"""The chunker's defaults, written once: kbase.ingest.chunk's ``ChunkSettings`` starts from them,
and the help of the CLI's ``--max-tokens``, ``--overlap`` and ``--min-tokens`` shows them
(docs/cli-reference.md is generated from that help), reading them only when that help is shown."""

# Budget: the model (all-MiniLM-L6-v2) reads 256 tokens; 2 go to [CLS]/[SEP] and up to about 32
# to the "title > headings" context prepended for embedding, which leaves 222: keep 200 of them.
MAX_TOKENS = 200
# 12% overlap between consecutive prose chunks of one section: a sentence that straddles a cut is
# still found whole in one of the two chunks.
OVERLAP_RATIO = 0.12
# Chunks below this many tokens (a one-line section) merge with a neighbour when both fit.
MIN_TOKENS = 48
