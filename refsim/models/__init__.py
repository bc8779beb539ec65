"""NumPy forwards of the model families refsim calibrates and evaluates (float32, no torch).

    bert    BERT-style post-LN encoder (all-MiniLM-L6-v2 and its family): embedding cosine
    llama   Llama-style decoder (llama, mistral, qwen2 configs): perplexity

Each forward is split into the groups of linear layers a sequential calibration quantizes in turn
(``block_steps``). Reading a model folder into these objects is :mod:`refsim.io.model_folder`.
"""
