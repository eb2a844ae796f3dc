"""Knowledge: the user's own folders, indexed for retrieval with citations (issue 21).

Qt-free, above core/ and beside store/: collections of folders and files (collections.py), a
scanner that never leaves them (scanner.py), converters to text (convert.py), chunks that keep
their place in the file (chunking.py), incremental indexing with progress and cancel
(indexer.py), and the index behind one small interface (index.py; SQLite FTS5 in fts.py,
searched by search.py).
"""
