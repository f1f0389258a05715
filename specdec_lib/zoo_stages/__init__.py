"""The zoo's stages: one small module per kind of work (hand-written plumbing, not a chapter), run by
``python -m specdec_lib.zoo_train`` (the command line only; no module here imports it). ``base``: the prompts,
the tokenizer, the target and the draft. ``common``: what every proposer stage shares (the frozen target, the
cards' common fields, the target's greedy and regenerated text, batches, ``at_budgets``). ``heads``, ``eagle``,
``dflash``: the trained families of chapters 05-06, 07-09 and 10-11. ``ladder``: the fair ladder (issue 51),
each drafter retrained on the target's regenerated text for a stated budget. ``chat_data``: the real model's
own answers, written in resumable chunks, and the target features its drafters train on. ``eagle3_real``: the
real model's EAGLE-3, in resumable runs. ``cards``: what each stage declares as data (its inputs, its budget,
the fixed words of its card); a stage's code is its steps (data -> the chapter's ``train_*`` -> evaluation ->
card -> save), each a short function."""
