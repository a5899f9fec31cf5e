package image

import "path/filepath"

// UpperDir is the dir that holds what container id wrote to its rootfs:
// its overlay's upper dir (root/containers/<id>/upper), whose size is the
// container's writable layer in CRI's ContainerStats. The store's lock is
// not taken (a prepare mounting an overlay holds it): the caller finds a
// dir that does not exist when the container has no rootfs.
func (s *Store) UpperDir(containerID string) (string, error) {
	if err := checkID(containerID); err != nil {
		return "", err
	}
	return filepath.Join(s.containerDir(containerID), "upper"), nil
}
