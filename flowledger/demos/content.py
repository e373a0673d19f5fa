"""Demo of the content repository: packing, durable counts, archive, integrity."""

from __future__ import annotations

import os
import time
import uuid

from rich.console import Console
from rich.table import Table

from storage import ObjectStore
from storage.content import (
    ContentIntegrityError,
    ContentRepository,
    ContentRepositorySettings,
)


def demo_content(store: ObjectStore, console: Console) -> None:
    console.rule("[bold]Content repository: packed resource claims on object storage")
    root = store.scoped(f"demo/content-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}")
    settings = ContentRepositorySettings(archive_cleanup_frequency=0, archive_max_retention=0)
    repo = ContentRepository(root, settings).initialize()
    store.stats.reset()
    claims = []
    with repo.transaction() as session:
        for i in range(2000):
            claims.append(session.write_bytes(f"flowfile {i} ".encode() * 50))
    resource_claims = {c.resource_claim for c in claims}
    console.print(
        f"2,000 contents of ~600 B -> {len(resource_claims)} resource claims; requests: "
        f"{store.stats.snapshot()} (one object per content would be 2,000 PUTs)"
    )
    console.print(f"a content claim: [cyan]{claims[7].to_json()}[/]")
    big = repo.import_from(os.urandom(9 * 1024 * 1024))
    repo.commit()
    console.print(f"a 9 MiB content streams into a claim of its own: [cyan]{big}[/]")
    merged = repo.merge([big, big], header=b"[", footer=b"]", demarcator=b",")
    repo.commit()
    console.print(
        f"merged (server-side UploadPartCopy on S3): {merged.length} bytes, {merged.checksum}"
    )
    repo.close()

    reopened = ContentRepository(root, settings).initialize()
    ok = all(reopened.read_bytes(c) == f"flowfile {i} ".encode() * 50 for i, c in enumerate(claims))
    console.print(f"after a restart every content reads back byte-exact: [green]{ok}[/]")
    first = claims[0].resource_claim
    table = Table("resource claim", "claimants", "state")
    table.add_row(str(first), str(reopened.get_claimant_count(first)), reopened.claim_state(first))
    for c in claims:
        if c.resource_claim == first:
            reopened.decrement_claimant_count(c)
    reopened.commit()
    table.add_row(str(first), str(reopened.get_claimant_count(first)), reopened.claim_state(first))
    reopened.run_archive_cleanup()
    table.add_row(str(first), "0", reopened.claim_state(first))
    console.print(table)

    victim = claims[-1]
    key = f"containers/{victim.resource_claim.container}/{victim.resource_claim.key}"
    data = bytearray(root.get(key))
    data[victim.offset] ^= 0xFF
    root.put(key, bytes(data))
    try:
        reopened.read_bytes(victim)
    except ContentIntegrityError as exc:
        console.print(f"a flipped byte is caught: [yellow]{exc}[/]")
    reopened.close()
