"""The LLM policy (docs/architecture.md §4): LangChain agents on any OpenAI-compatible chat model, with tools
over the graph and the target, whose answers the loop's screens and judge keep honest."""
