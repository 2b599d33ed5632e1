package sqllock

import "github.com/distlock/distlock/backend"

// serverInfo is Capabilities.Server: Options.Server (a URL's host and
// port), with db.system.name "postgresql" or "mysql" (MariaDB's servers
// too: telling them apart would cost a round trip).
func (d *Driver) serverInfo() backend.Server {
	system := "mysql"
	if d.dia.name() == "postgres" {
		system = "postgresql"
	}
	if d.server == "" {
		return backend.Server{System: system}
	}
	return backend.ServerOf(d.server, system)
}
