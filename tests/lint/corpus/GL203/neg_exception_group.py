import torch


def check_all(model, batches):
    problems = []
    for batch in batches:
        try:
            model(batch)
        except ValueError as e:
            problems.append(e)
    if problems:
        raise ExceptionGroup("batches failed", problems)
