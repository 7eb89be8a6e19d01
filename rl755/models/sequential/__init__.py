"""Sequential world models: LSTM, transformer, heads, tasks, their trainer and saved-model loader."""
