package zklock

import "github.com/distlock/distlock/backend"

// server is Capabilities.Server: the server the connection is on
// when the Locker is made (go-zookeeper moves between the ensemble's
// servers on reconnects). ZooKeeper has no db.system.name in the
// semantic conventions.
func (d *Driver) server() backend.Server { return backend.ServerOf(d.conn.Server(), "") }
