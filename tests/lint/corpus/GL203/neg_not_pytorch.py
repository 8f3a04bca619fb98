# Keeping exceptions is common and harmless where no GPU tensors live.
def connect_any(addresses, connect):
    errors = []
    for address in addresses:
        try:
            return connect(address)
        except OSError as e:
            errors.append(e)
    raise ConnectionError(errors)
