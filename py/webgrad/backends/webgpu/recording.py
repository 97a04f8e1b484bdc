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
        # Handles of the buffers allocated during the call. Their values before it are garbage nothing
        # reads (a buffer the recording binds is kept alive, so none it used is freed and handed out
        # again within the call): the recording writes them before reading, and may write others.
        self.made = set()
        # The dispatches as a replay queues them (runtime.replay), params offsets counted from the
        # recording's first block: (bind groups' generation, entries), kept while its groups last;
        # `rebound`: the dispatches whose entries a rebind made stale.
        self.queued, self.rebound = None, ()

    def sites(self, storage):
        """Where the dispatches bind storage: (dispatch index, binding slot) pairs."""
        return [(i, j) for i, (_, handles, _) in enumerate(self.dispatches)
                for j, handle in enumerate(handles) if handle == storage.handle]

    def rebind(self, old, new, sites):
        """Bind storage new at sites (found with sites(), where old was bound), from the next replay on."""
        for i, j in sites:
            pipeline, handles, grid = self.dispatches[i]
            self.dispatches[i] = (pipeline, handles[:j] + (new.handle,) + handles[j + 1:], grid)
        self.rebound = {*self.rebound, *(i for i, _ in sites)}
        self.storages.discard(old)
        self.storages.add(new)
