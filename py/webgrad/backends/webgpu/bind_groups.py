"""The bind groups the runtime has its driver keep, and when it lets them go (see runtime.py)."""
import itertools
from collections import defaultdict

# Bind groups kept for reuse. Pooled buffers meet in ever new combinations over a long run, so the
# cache starts over when it is past this size (after a submit, when no queued work uses them).
BIND_GROUPS_KEPT = 16384


class BindGroups:
    """The bind groups the driver holds, by what they bind: the arena and one combination of
    buffers, for every kernel of one layout. Ids are handed out here; the driver makes each group at
    the submit that first uses it (take_new) and drops it when told. Groups are forgotten only
    between submits, when no queued dispatch names them: those of a buffer when it is destroyed,
    and all of them when the arena is replaced or they are more than `kept`."""

    def __init__(self, kept=BIND_GROUPS_KEPT):
        self.kept = kept
        self.ids = {}                       # (bindings, buffer handles) -> id
        self._new = []                      # (id, pipeline, buffer handles) the driver has yet to make
        self._of_buffer = defaultdict(set)  # buffer handle -> keys of the groups that bind it
        self._next_id = itertools.count(1)
        self.generation = 0                 # counts clear()s: an id noted before one is stale after it

    def __len__(self):
        return len(self.ids)

    def add(self, key, pipeline):
        """The id of a new group for key, made with pipeline's layout at the next submit."""
        group = self.ids[key] = next(self._next_id)
        self._new.append((group, pipeline, key[1]))
        for handle in key[1]:
            self._of_buffer[handle].add(key)
        return group

    def take_new(self):
        new, self._new = self._new, []
        return new

    def forget_buffer(self, handle):
        """The ids of the groups that bind a buffer about to be destroyed, forgotten."""
        keys = self._of_buffer.pop(handle, ())
        for key in keys:
            # unlinked from its other buffers too, or a long-lived buffer (a weight bound with
            # ever-new temporaries) would collect dead keys forever
            for other in key[1]:
                if other != handle:
                    self._of_buffer[other].discard(key)
        return [self.ids.pop(key) for key in keys]

    def clear(self):
        assert not self._new, "bind groups forgotten while queued work uses them"
        self.generation += 1
        self.ids.clear()
        self._of_buffer.clear()
