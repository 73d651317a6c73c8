"""Loading a model from any source: the source grammar, checkpoint folders, the Hub, GGUF files,
random models, the will-it-fit check before a download, and the loaded model with its card.
"""
