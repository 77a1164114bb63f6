"""Loaded by every Python process started with this folder on PYTHONPATH
(codec_ab.py): with STATEPIPE_AB_PICKLE_ONLY=1, statepipe pickles every
value (the behaviour before the array frame)."""
import os
if os.environ.get("STATEPIPE_AB_PICKLE_ONLY"):
    import pickle
    import statepipe._codec as c
    c.dumps = lambda v: pickle.dumps(v, 5)
