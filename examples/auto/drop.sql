DROP TABLE IF EXISTS coupons_{{.RunID}};
DROP TABLE IF EXISTS redemptions_{{.RunID}};
DROP TABLE IF EXISTS items_{{.RunID}};
DROP TABLE IF EXISTS accounts_{{.RunID}};
