"""Embeddings: the model, its derived ONNX graph, vectors in the index, nearest-neighbour search."""
