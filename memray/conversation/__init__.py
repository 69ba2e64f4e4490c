"""The conversation core: buffer, persist chain, working memory, summaries, context, host."""
