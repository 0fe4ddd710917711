"""What the model sees: turns of a history, their chat format and token ids (Qwen3-Coder's
format or the served model's own template and tokenizer), and a server's reported usage.
"""
