// Command kubecheck validates the Kubernetes manifests of deploy/ offline,
// for `make lint`: every document must decode strictly (no unknown fields,
// no wrong types) into the Kubernetes API's own Go types (k8s.io/api, the
// source the published JSON schemas are generated from), and a few rules
// of this project must hold (see check). It is its own module so that the
// shipped service never depends on the Kubernetes libraries.
//
//	go run . FILE.yaml ...
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubecheck FILE.yaml ...")
		os.Exit(2)
	}
	bad := 0
	for _, path := range os.Args[1:] {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			bad++
			continue
		}
		for _, err := range checkFile(data) {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			bad++
		}
	}
	if bad > 0 {
		os.Exit(1)
	}
}

// checkFile validates every YAML document of a file.
func checkFile(data []byte) []error {
	var errs []error
	docs := splitDocuments(data)
	if len(docs) == 0 {
		return []error{errors.New("no Kubernetes object in the file")}
	}
	for i, doc := range docs {
		if err := checkDocument(doc); err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", i+1, err))
		}
	}
	return errs
}

// splitDocuments splits a YAML stream at "---" lines, dropping documents
// that hold only comments or blanks.
func splitDocuments(data []byte) [][]byte {
	var out [][]byte
	for _, part := range bytes.Split(append([]byte("\n"), data...), []byte("\n---")) {
		keep := false
		for _, line := range strings.Split(string(part), "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				keep = true
				break
			}
		}
		if keep {
			out = append(out, part)
		}
	}
	return out
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// checkDocument decodes one object strictly into its API type and applies
// the project's rules to it.
func checkDocument(doc []byte) error {
	var tm typeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return fmt.Errorf("not YAML: %w", err)
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1 Secret":
		obj = &corev1.Secret{}
	case "v1 Service":
		obj = &corev1.Service{}
	case "apps/v1 Deployment":
		obj = &appsv1.Deployment{}
	case "batch/v1 Job":
		obj = &batchv1.Job{}
	case "policy/v1 PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "networking.k8s.io/v1 Ingress":
		obj = &networkingv1.Ingress{}
	default:
		return fmt.Errorf("apiVersion %q kind %q is not one this project uses (add it to kubecheck if it should be)", tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return check(obj)
}

// check holds the rules that decoding alone cannot see.
func check(obj any) error {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		if err := named(o.Name); err != nil {
			return err
		}
		if o.Spec.Selector == nil || len(o.Spec.Selector.MatchLabels) == 0 {
			return fmt.Errorf("Deployment %s: spec.selector.matchLabels is required", o.Name)
		}
		if !labels.SelectorFromSet(o.Spec.Selector.MatchLabels).Matches(labels.Set(o.Spec.Template.Labels)) {
			return fmt.Errorf("Deployment %s: the selector does not match the pod template's labels", o.Name)
		}
		return checkPod("Deployment "+o.Name, o.Spec.Template.Spec)
	case *batchv1.Job:
		if err := named(o.Name); err != nil {
			return err
		}
		if p := o.Spec.Template.Spec.RestartPolicy; p != corev1.RestartPolicyNever && p != corev1.RestartPolicyOnFailure {
			return fmt.Errorf("Job %s: restartPolicy must be Never or OnFailure, not %q", o.Name, p)
		}
		return checkPod("Job "+o.Name, o.Spec.Template.Spec)
	case *corev1.Service:
		if len(o.Spec.Selector) == 0 || len(o.Spec.Ports) == 0 {
			return fmt.Errorf("Service %s: needs a selector and ports", o.Name)
		}
		return named(o.Name)
	case *corev1.ConfigMap:
		return named(o.Name)
	case *corev1.Secret:
		return named(o.Name)
	case *policyv1.PodDisruptionBudget:
		return named(o.Name)
	case *networkingv1.Ingress:
		return named(o.Name)
	}
	return nil
}

func named(name string) error {
	if name == "" {
		return errors.New("metadata.name is required")
	}
	return nil
}

// checkPod: every container has a name and an image, and a container that
// serves the API (one that exposes port 8080 without a command of its own)
// is ready only when /readyz says so.
func checkPod(what string, spec corev1.PodSpec) error {
	if len(spec.Containers) == 0 {
		return fmt.Errorf("%s: no containers", what)
	}
	for _, c := range spec.Containers {
		if c.Name == "" || c.Image == "" {
			return fmt.Errorf("%s: every container needs a name and an image", what)
		}
		serves := len(c.Command) == 0 && len(c.Ports) > 0 && c.Ports[0].ContainerPort == 8080
		if serves && (c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz") {
			return fmt.Errorf("%s: container %s serves the API but its readinessProbe is not GET /readyz", what, c.Name)
		}
	}
	return nil
}
