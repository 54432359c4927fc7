CREATE TABLE ActorDirector (
  actor_id INT,
  director_id INT,
  timestamp INT PRIMARY KEY
);
