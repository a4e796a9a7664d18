"""What reading one chunk saw (:class:`ChunkStats`), kept apart from the text parser's Numba kernels so
that readers which parse nothing (Parquet, cuDF on GPU workers) never load Numba."""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_REPORTED = 5  # bad lines described per file


@dataclass
class ChunkStats:
    """What one chunk's parse saw: edges kept, bad lines skipped, the first few described."""

    edges: int = 0
    skipped: int = 0
    bad: list = field(default_factory=list)  # [(path, line, kind description, text)]

    def merge(self, other: "ChunkStats") -> "ChunkStats":
        return ChunkStats(self.edges + other.edges, self.skipped + other.skipped,
                          (self.bad + other.bad)[:MAX_REPORTED * 4])
