"""``python -m philly_analyze.schemas > docs/store.md`` regenerates the store's docs."""

from philly_analyze.schemas.docs import markdown

print(markdown(), end="")
