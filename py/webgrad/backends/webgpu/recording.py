"""What the runtime records of a jitted call (runtime.py's start_recording, replay) and the fusion
pass rewrites (fusion.py)."""


class Recording:
    """The GPU work of one recorded call (see webgrad.jit): its dispatches with their parameter
    blocks, its buffer uploads, and every buffer they touch, kept alive (out of the pool) for as
    long as the recording may be replayed."""

    def __init__(self):
        self.dispatches = []   # (pipeline, buffer handles, grid)
        self.params = bytearray()
        self.refresh = []      # (dispatch index, words_fn): parameters recomputed at each replay
        self.writes = []       # (storage, bytes) uploaded during the call
        self.storages = set()
        self.elementwise = {}  # dispatch index -> (MapSpec, offsets, scalar words) of a map kernel (fusion.py)
