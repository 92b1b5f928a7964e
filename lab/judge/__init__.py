"""The judge: an LLM grades answers. ``rubric`` (the judgement, its prompt, retries and
calibration), ``methods`` (the judging methods and their registry), ``perturb`` and ``checks``
(perturbed references a judge must tell apart), ``repeats`` (how repeatable a judgement is),
``labels`` (the one store of people's labels), ``agree`` (the judge's agreement with them)."""
