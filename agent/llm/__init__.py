"""Model providers behind one protocol (:class:`agent.llm.base.LLMProvider`)."""
