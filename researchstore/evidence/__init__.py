"""Evidence retrieval: bounded public reads kept as workspace evidence, behind receipts.

The layout, one concept per module:

- ``spec``: the tool's contract (seed 002): names, parameters, input schema;
- ``config``: ``RetrievalConfig``, passed in with the store or the call;
- ``outcome``: ``Outcome``, what a retrieval found, and its result payload;
- ``content``: reading a page's text or captions through a ``Fetcher``;
- ``receipts``: the durable receipt of each ``(workspace_id, mutation_id)``;
- ``records``: a result stored as a report in the workspace's source;
- ``retrieve``: ``retrieve``, the tool's body, tying them together.

The entry point is ``researchstore.evidence.retrieve.retrieve``; it is not
re-exported here, where ``retrieve`` names its module. Importing this
package or ``spec`` imports nothing else (the tool catalogue lists the tool
from ``spec``), and ``config`` does not import httpx.
"""
