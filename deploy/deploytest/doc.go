// Package deploytest checks the deployment files of mcpcluster: the
// docker-compose.yml (loaded and schema-validated with compose-go) and the
// Helm chart in deploy/helm/mcpcluster (helm lint, helm template, and every
// rendered object decoded strictly against the Kubernetes, Gateway API and
// Prometheus Operator types). It is a module of its own so that these
// dependencies never enter the product's module graph.
package deploytest
