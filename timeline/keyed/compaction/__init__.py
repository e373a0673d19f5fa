"""Compaction of merge-on-read tables: plans (`compaction.requested`), the task that
merges one file slice into a new base file, and completing the plan. Used through
`timeline.keyed` and the table's services."""
