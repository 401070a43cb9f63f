"""Prefect: the tasks, the flows and serving deployments. With :mod:`honesteval.server`, the only
package that imports Prefect."""
