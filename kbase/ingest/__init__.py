"""Pure steps from a file to what the index stores: discover, decode, parse, chunk, links, PDFs,
canvases, Markdown to plain text (``markup``), and ``derive``, which joins them."""
