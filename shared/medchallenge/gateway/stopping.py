"""The one signal that a study's job was left because the gateway is stopping."""


class GatewayStopping(Exception):
    """The gateway is stopping while a job works on the study (in the job-runner service, or on the cluster): the
    study stays in running/ (its job in the inbox, or on the cluster), and the next start takes it up again."""
