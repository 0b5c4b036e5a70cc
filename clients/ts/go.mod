module github.com/mcpcluster/mcpcluster/clients/ts

go 1.26.8

require github.com/mcpcluster/mcpcluster v0.0.0

replace github.com/mcpcluster/mcpcluster => ../..
