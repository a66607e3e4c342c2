// Package docker holds yesguard's packaging and observability as code: the
// image (Dockerfile), the local stack (compose.yaml: NATS with JetStream,
// yesguard, Prometheus, Grafana), Prometheus's scrape config and Grafana's
// provisioning with the yesguard dashboard.
//
// It has no Go code of its own. Its tests check what can be checked
// without a container engine: every dashboard query names only series of
// the metrics catalogue; compose.yaml has the expected services and mounts
// files that exist; the Dockerfile's build line builds; and, with
// YESGUARD_PROMETHEUS_BIN set to a Prometheus binary, every panel's query
// returns data from a real Prometheus scraping a real guard.
package docker
