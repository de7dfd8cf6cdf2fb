-- Before each burst (and each solo twin): a coupon, an item with 3 in
-- stock and an empty account, named by the burst's token.
INSERT INTO coupons_{{.RunID}} (code) VALUES ('{{.Token}}');
INSERT INTO items_{{.RunID}} (code, stock) VALUES ('{{.Token}}', 3);
INSERT INTO accounts_{{.RunID}} (code, balance) VALUES ('{{.Token}}', 0);
