"""Files to rows: discover, decode, parse, chunk, links, the pipeline."""
