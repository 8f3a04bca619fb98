# Plain Python: no torch, no backward(); the same shapes mean nothing here.
def summarize(model, rows):
    total = 0
    out = []
    for row in rows:
        value = model(row)
        total += value
        out.append(value)
    return total, out
