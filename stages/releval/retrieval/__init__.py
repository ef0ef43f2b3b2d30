"""Retrieval: models and their use protocols, chunking, dense and BM25 search, fusion, reranking, run tables."""
