"""The index run, the one part that writes notes into the file: ``pipeline`` (a run over the
roots), ``prepare`` (a file's bytes to derived rows, in worker processes), ``workers`` (the
supervised PDF workers), ``writes`` (a document's rows in one transaction) and ``maintenance``
(re-deriving from stored text, check, compact)."""
