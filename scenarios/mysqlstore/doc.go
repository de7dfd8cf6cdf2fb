// Package mysqlstore is racetest's MySQL and MariaDB backend (go-sql-driver/mysql).
package mysqlstore
