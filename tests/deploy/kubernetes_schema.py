"""Offline schema check of Kubernetes objects: every field must be one the
object's type has, with a value of the field's kind. The types are the
Kubernetes API's own, as Debian's python3-kubernetes generates them from the
API's OpenAPI description (kubernetes.client.V1DaemonSet and so on), so a
misspelt field (readOnlyRootFileSystem) or a list written as a map fails
here, which `kubectl label --local` lets through and `kubectl apply
--dry-run=client` cannot check without an API server. Objects of custom
resources (ServiceMonitor) have no such type and are not checked."""
import kubernetes.client

SCALARS = {"str": (str,), "int": (int,), "bool": (bool,), "float": (int, float)}


def model_name(document):
    group_version = document.get("apiVersion", "")
    version = group_version.split("/")[-1]
    return version.capitalize() + document.get("kind", "")


def is_checked(document):
    return hasattr(kubernetes.client, model_name(document))


def schema_errors(document):
    """Every field of `document` that its Kubernetes type does not have, or
    whose value is of the wrong kind, as 'path: reason' lines."""
    errors = []
    _check(document, model_name(document), document.get("kind", "?"), errors)
    return errors


def _check(value, type_name, path, errors):
    if type_name == "object":  # IntOrString and free-form fields
        return
    if type_name.startswith("list["):
        if not isinstance(value, list):
            errors.append(f"{path}: a list is expected")
            return
        for index, item in enumerate(value):
            _check(item, type_name[5:-1], f"{path}[{index}]", errors)
        return
    if type_name.startswith("dict("):
        if not isinstance(value, dict):
            errors.append(f"{path}: a map is expected")
            return
        inner = type_name[5:-1].split(", ", 1)[1]
        for key, item in value.items():
            _check(item, inner, f"{path}.{key}", errors)
        return
    if type_name in SCALARS:
        kinds = SCALARS[type_name]
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            errors.append(f"{path}: {type_name} expected, not {value!r}")
        return
    model = getattr(kubernetes.client, type_name, None)
    if model is None:
        errors.append(f"{path}: unknown type {type_name}")
        return
    if not isinstance(value, dict):
        errors.append(f"{path}: an object ({type_name}) is expected")
        return
    fields = {json_name: name for name, json_name in model.attribute_map.items()}
    for key, item in value.items():
        if key not in fields:
            errors.append(f"{path}.{key}: not a field of {type_name}")
            continue
        _check(item, model.openapi_types[fields[key]], f"{path}.{key}", errors)
