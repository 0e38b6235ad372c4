"""The evidence set shipped with LUMA: signed measured records from every machine the project's own sprints ran on."""
