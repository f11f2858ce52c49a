"""A step's inputs of MAX's paged cache, as a graph run next must read them.

MAX 26.7's cache manager (`runtime_inputs`) writes a step's cache lengths, page table and dispatch data into a
fresh host buffer and copies it into the buffers the graph reads (`batch_inplace_copy`), a copy that is still
under way when it returns. On the CPU a graph run right after does not wait for it: beside a busy loop on each of
two cores, a graph that returns the cache lengths it was given returned the step before's in 10 and 19 of 3600
runs, and none of 3600 once the device was synchronised between the two. A served decode step that reads the
step before's lengths stores its new keys one position early and attends without them: the wrong texts step 14's
server gave under load (the performance page, "Step 14's fault, found").

    staged(manager, batches)   manager.runtime_inputs(batches), the copies done
    settle(devices)            wait for every copy sent to `devices` (after MAX's own prepare_batch)
"""

from __future__ import annotations

from collections.abc import Iterable

# MAX is imported inside the function that uses it: importing it takes seconds.


def settle(devices: Iterable) -> None:
    """Wait until every copy sent to each of `devices` has landed."""
    for device in devices:
        device.synchronize()


def staged(manager, batches):
    """The paged cache's inputs for `batches` (lists of contexts, one a replica), copied to where the graph reads
    them before this returns."""
    inputs = manager.runtime_inputs(batches)
    settle(_devices(inputs))
    return inputs


def _devices(inputs) -> list:
    """The distinct devices of the buffers among `inputs` (a tree of MAX's KV inputs)."""
    from max import tree
    from max.driver import Buffer

    found = {}
    for leaf in tree.leaves(inputs):
        if isinstance(leaf, Buffer):
            found.setdefault((leaf.device.label, leaf.device.id), leaf.device)
    return list(found.values())
