"""The cluster-side guard: dispatch's identity and runtime rules enforced by the API server.

* ``contract``: the names the guard, its manifests and dispatch share (annotations, labels,
  webhook names and paths) and ``GuardConfig``;
* ``guard``: the decisions, pure: one AdmissionReview request in, one answer out (``diff``
  names what a request changed);
* ``server``: ``dispatch admission serve``, the HTTPS webhook server around ``guard``, and
  ``events``, the Event it records on a refused resume;
* ``certs``: ``dispatch admission certs``, a CA and the server's certificate;
* ``manifests``: ``dispatch admission manifests``, the objects that install the server, and
  ``policy``: the ValidatingAdmissionPolicy for clusters that want no server.

docs/explanation/cluster-guard.md says what it guards and what it cannot;
docs/design/0011-cluster-guard.md why it is built this way.
"""
