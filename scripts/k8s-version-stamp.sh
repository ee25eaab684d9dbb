# Sourced by the scripts that build Kubernetes binaries: the -ldflags
# hack/lib/version.sh stamps, so each binary reports its release.
#   k8s_version_stamp v1.34.4   # prints " -X ...gitVersion=v1.34.4 -X ..."
k8s_version_stamp() {
    local version=$1 minor stamp="" pkg
    minor=${version#v1.}; minor=${minor%%.*}
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        stamp+=" -X ${pkg}.gitVersion=${version} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
        stamp+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
    done
    printf '%s' "$stamp"
}
