"""What is counted against people and the gateway: model usage and its cost, the owner's
notices about money caps, and seconds of speech transcribed."""
