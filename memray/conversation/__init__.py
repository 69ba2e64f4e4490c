"""The conversation cores: buffer, persist chain, working memory, summaries, context assembly."""
